"""firstwrite: exactly-once request deduplication on DynamoDB conditional writes."""
