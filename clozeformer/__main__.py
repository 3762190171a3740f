import sys

from clozeformer.commands.cli import main

sys.exit(main())
