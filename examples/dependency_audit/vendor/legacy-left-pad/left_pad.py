"""A component copied into the project with no package metadata: only its LICENSE
file says under which terms it may be used (the license reviewer reads it)."""


def left_pad(text: str, width: int, fill: str = " ") -> str:
    """``text`` padded on the left with ``fill`` to ``width`` characters."""
    return text.rjust(width, fill)
