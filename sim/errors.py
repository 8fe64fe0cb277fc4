"""The one exception a user sees for a bad scenario, a bad override or a bad file."""


class ScenarioError(ValueError):
    """A scenario cannot be used as written.

    The message is one line that names the bad field by its dotted path and says why, e.g.
    ``workloads.web.rate: must be > 0 (got -5)``; the CLI prints it as is.  It subclasses
    ValueError so callers that already catch bad input keep working.
    """


class HostError(RuntimeError):
    """The host cannot do what replay needs (not root, no writable cgroups, a missing
    controller, knob or program, another replay running); the message says what and where."""
