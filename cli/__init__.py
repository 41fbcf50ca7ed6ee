"""The ``neardup`` command line: a thin typer layer over the engine."""
