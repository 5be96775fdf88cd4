"""The ``pricing`` pipeline (seed 003): catalog, demand model, optimizer, policy, workers and graph.

Also the explainer, sensitivity, reporter, intent router and the single-agent fast path.
"""
