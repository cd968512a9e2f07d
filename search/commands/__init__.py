"""Subcommands of ``python -m search``: every module here is one.

A command module defines ``NAME`` (the command word), ``add_parser(sub, common)``, which adds
its argparse subparser (``common(parser)`` adds the storage options every command takes),
and ``run(args, out) -> int``.  :mod:`search.cli` discovers them; nothing else to register.
"""
