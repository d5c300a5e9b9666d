"""Write the README's options tables from the commands' own --help.

    python scripts/readme_options.py           # rewrite the tables in README.md
    python scripts/readme_options.py --check   # exit 1 if they differ from --help

Each table sits between ``<!-- options: COMMAND -->`` and ``<!-- end options -->``.
tests/test_docs.py runs the check, so a flag added, renamed or reworded in the code and
not here fails the suite.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from a3c.options import filled_options_tables

README = Path(__file__).resolve().parent.parent / "README.md"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 on a difference")
    args = parser.parse_args()
    current = README.read_text()
    wanted = filled_options_tables(current)
    if wanted == current:
        print("README options tables match --help")
        return 0
    if args.check:
        print("README options tables differ from --help: run python scripts/readme_options.py")
        return 1
    README.write_text(wanted)
    print(f"rewrote the options tables in {README}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
