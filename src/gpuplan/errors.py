"""The one exception tree of gpuplan.

Everything the library raises on purpose derives from :class:`GpuplanError`. Each of them is the
user's input being wrong or unavailable (a typo in an id, a malformed file, a negative size), never a
bug, so the CLI turns it into one line on stderr and exit code 2. "Does not fit" is *not* an error:
estimates return it as a result with reasons.

    GpuplanError
     ├── QuantityError        a number with units that cannot be read ("7X", "-3GB")
     ├── UnknownIdError       no accelerator / model with that id or alias (suggests near matches)
     ├── AmbiguousIdError     an alias that names several entries (lists them)
     ├── CatalogError         a catalog file that is unreadable or breaks the schema (file, entry, field)
     ├── ModelConfigError     a model config.json that cannot be read as a supported architecture
     ├── HubError             the Hugging Face Hub could not be reached or refused the request
     ├── NeedsArchitectureError  an estimate needs layers/hidden size but only a parameter count was given
     ├── LayoutError          an impossible parallel layout (the message shows every factor)
     ├── JobError             an impossible job recipe (batch, precision, method...)
     └── InputError           options that cannot go together, or a value a flag refuses (names the flag)
"""

from __future__ import annotations


class GpuplanError(Exception):
    """Base of every error gpuplan raises on purpose; ``str(err)`` is one line that says what to fix."""

    exit_code = 2


class QuantityError(GpuplanError, ValueError):
    """A quantity (size, count, duration, price) that cannot be parsed or is out of range."""


class UnknownIdError(GpuplanError, LookupError):
    """No catalog entry matches the given id or alias."""

    def __init__(self, kind: str, name: str, suggestions: tuple[str, ...] = (), list_hint: str = ""):
        self.kind = kind
        self.name = name
        self.suggestions = tuple(suggestions)
        msg = f"unknown {kind} '{name}'"
        if self.suggestions:
            msg += "; did you mean " + ", ".join(f"'{s}'" for s in self.suggestions) + "?"
        if list_hint:
            msg += f" ({list_hint})"
        super().__init__(msg)


class AmbiguousIdError(GpuplanError, LookupError):
    """An alias that matches more than one catalog entry."""

    def __init__(self, kind: str, name: str, choices: tuple[str, ...]):
        self.kind = kind
        self.name = name
        self.choices = tuple(choices)
        super().__init__(f"'{name}' could be any of these {kind}s: {', '.join(self.choices)}; use the full id")


class CatalogError(GpuplanError):
    """A catalog file (bundled or the user's) that cannot be read or breaks the schema."""


class ModelConfigError(GpuplanError):
    """A model configuration that cannot be read as a supported architecture."""


class HubError(GpuplanError):
    """The Hugging Face Hub could not be reached, or refused to give the config."""


class NeedsArchitectureError(GpuplanError):
    """An estimate needs the architecture (layers, hidden size...) but only a parameter count was given."""


class LayoutError(GpuplanError):
    """A parallel layout that cannot exist: gpus not divisible by tp x pp x cp, offload without ZeRO..."""


class JobError(GpuplanError):
    """A training or serving recipe that cannot be run as given."""


class InputError(GpuplanError):
    """A value one option refuses, or options that cannot go together (``--offer`` with
    ``--usd-per-gpu-hour``). ``flag`` is the option as the CLI spells it; the Python API's keyword is the
    same name with underscores. The CLI prints it as click prints a bad parameter."""

    def __init__(self, flag: str, message: str):
        self.flag = flag
        self.message = message
        super().__init__(f"invalid value for {flag}: {message}")
