"""The worker process: Temporal worker hosting every pipeline's workflows and activities."""
