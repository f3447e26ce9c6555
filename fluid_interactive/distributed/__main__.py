"""``python -m fluid_interactive.distributed run main.py ...``: the same as ``fluid run``."""
import sys

from .cli import main

sys.exit(main())
