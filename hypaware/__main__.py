import sys

from hypaware.cli import main

sys.exit(main())
