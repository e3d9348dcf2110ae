"""What the labs' exercises are checked with.

`kafkalab.labs.checks` holds one module per lab topic (segments, indexes,
replication, ...). Each check takes the student's answer and the live objects
the notebook built (a log, a Partition, a coordinator, a cluster's history) and
works out the right answer from them: nothing is hard-coded, so a check is a
small, readable piece of Kafka's logic a student can open beside the notebook.
Like `kafkalab.viz`, nothing in kafkalab imports this package.
"""
