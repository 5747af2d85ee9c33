"""Hardware models. Imported only by drivers.system, which hands them out for MOCK device strings."""
