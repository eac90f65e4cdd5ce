"""Client quotas (Kafka's ClientQuotaManager family): byte rates, request time share and
controller mutation rate for users, client ids and both, enforced by throttling."""
