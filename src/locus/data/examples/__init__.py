"""Example inputs shipped with locus (the demo's price list)."""
