"""Zero-copy import (lakeFS's ``lakectl import``): objects referenced where they are, read with a guard."""
