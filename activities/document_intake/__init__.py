"""The document_intake pipeline (seed 000): loading, OCR, field extraction, validation, routing, review agent."""
