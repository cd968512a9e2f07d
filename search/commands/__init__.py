"""Subcommands of ``python -m search``: every module here is one.

A command module defines ``NAME`` (the command word), ``add_parser(sub, common)``, which adds
its argparse subparser (``common(parser)`` adds the storage options every command takes),
and ``run(args, out) -> int``.  :mod:`search.cli` discovers them; nothing else to register.
What commands share (failures as one line, opening the database and index) is in
:mod:`search.commands._common`, which the CLI imports too: imports go one way.
"""
