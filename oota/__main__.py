"""``python -m oota TASK ...``: the same as the ``oota`` command (oota/cli.py)."""

from oota.cli import main

if __name__ == "__main__":
    main()
