"""The exceptions a user sees: a bad scenario, a bad override or file, a host that cannot
replay. Every one derives from ColosimError, and the CLI prints only those (and OSError on the
user's files) as `colosim: error: <message>`; anything else is a bug in colosim and is reported
as one, with its traceback."""


class ColosimError(Exception):
    """A user error: the input, the host or the installation cannot do what was asked. The
    message is one line that says what and where; the CLI prints it as is."""


class ScenarioError(ColosimError, ValueError):
    """A scenario cannot be used as written.

    The message is one line that names the bad field by its dotted path and says why, e.g.
    ``workloads.web.rate: must be > 0 (got -5)``; the CLI prints it as is.  It subclasses
    ValueError so callers that already catch bad input keep working.
    """


class SpecRefused(ScenarioError):
    """The simulator core refused a scenario's spec (a rule only the core checks, e.g. a
    child's cpuset outside its parent's); the message is the core's."""


class HostError(ColosimError, RuntimeError):
    """The host cannot do what replay needs (not root, no writable cgroups, a missing
    controller, knob or program, another replay running); the message says what and where."""


class WriteRefused(ColosimError, ValueError):
    """A knob write the kernel refuses (EINVAL, a value out of the file's range) or that
    would be refused; a policy's refused write is recorded and the agent goes on."""
