"""Write the options tables of docs/options.md (and any other page) from the commands' --help.

    python scripts/readme_options.py           # rewrite the tables
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

REPO = Path(__file__).resolve().parent.parent
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 on a difference")
    args = parser.parse_args()
    stale = [page for page in PAGES if filled_options_tables(page.read_text()) != page.read_text()]
    if not stale:
        print("options tables match --help")
        return 0
    if args.check:
        names = ", ".join(str(page.relative_to(REPO)) for page in stale)
        print(f"options tables in {names} differ from --help: run python scripts/readme_options.py")
        return 1
    for page in stale:
        page.write_text(filled_options_tables(page.read_text()))
        print(f"rewrote the options tables in {page.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
