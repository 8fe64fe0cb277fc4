"""Policy agents (none, static, koordinator, rubik) that drive cgroups through one seam.

The seam and the policies arrive with the [policies] issue; this package exists so the
build installs the layout ../shared/DESIGN.md fixes.
"""
