"""The document_intake pipeline (seed 000).

Loading, OCR, field extraction, validation, routing, review agent.
"""
