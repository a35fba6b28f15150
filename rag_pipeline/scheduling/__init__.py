"""When each channel/project is synced: watermarks from the sync runs an instance holds, and the plan of
the next range runs (catch-up, initial history, request budgets). Pure functions, no Dagster."""
