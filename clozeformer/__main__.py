import sys

from clozeformer.cli import main

sys.exit(main())
