// A test peer: Kafka's own Java client (kafka-clients 4.3) driven from the
// command line, so tests/integration can run it against a kafkalab broker.
//
//   java -cp <jars>:<classes> KafkaPeer <subcommand> --bootstrap HOST:PORT [--name value ...]
//
// Every event and result is one JSON object on its own line on stdout; the
// client's own logs go to stderr. On failure the last stdout line is
// {"event": "error", ...} and the exit status is 1. Options are `--name value`
// pairs; `--config key=value` (repeatable) passes any client property through.
//
// Subcommands: produce, consume, transactions, admin <op>. To add one, write a
// static method taking Opts and register it in SUBCOMMANDS (or, for an Admin
// call, in ADMIN_OPS); tests/integration/java_peer.py recompiles this file
// whenever it changes.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.AlterConfigsOptions;
import org.apache.kafka.clients.admin.AlterPartitionReassignmentsOptions;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupListing;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.DescribeProducersResult;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.PartitionReassignment;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.QuorumInfo;
import org.apache.kafka.clients.admin.TopicListing;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public final class KafkaPeer {

    interface Command {
        void run(Opts opts) throws Exception;
    }

    static final Map<String, Command> SUBCOMMANDS = new LinkedHashMap<>();
    static final Map<String, Command> ADMIN_OPS = new LinkedHashMap<>();

    static {
        SUBCOMMANDS.put("produce", KafkaPeer::produce);
        SUBCOMMANDS.put("consume", KafkaPeer::consume);
        SUBCOMMANDS.put("transactions", KafkaPeer::transactions);
        SUBCOMMANDS.put("admin", KafkaPeer::admin);

        ADMIN_OPS.put("describeCluster", KafkaPeer::describeCluster);
        ADMIN_OPS.put("createTopics", KafkaPeer::createTopics);
        ADMIN_OPS.put("listTopics", KafkaPeer::listTopics);
        ADMIN_OPS.put("describeConfigs", KafkaPeer::describeConfigs);
        ADMIN_OPS.put("incrementalAlterConfigs", KafkaPeer::incrementalAlterConfigs);
        ADMIN_OPS.put("listConsumerGroups", KafkaPeer::listConsumerGroups);
        ADMIN_OPS.put("describeProducers", KafkaPeer::describeProducers);
        ADMIN_OPS.put("describeMetadataQuorum", KafkaPeer::describeMetadataQuorum);
        ADMIN_OPS.put("electLeaders", KafkaPeer::electLeaders);
        ADMIN_OPS.put("alterPartitionReassignments", KafkaPeer::alterPartitionReassignments);
        ADMIN_OPS.put("listPartitionReassignments", KafkaPeer::listPartitionReassignments);
    }

    public static void main(String[] args) {
        int status = 0;
        try {
            if (args.length == 0 || !SUBCOMMANDS.containsKey(args[0])) {
                throw new IllegalArgumentException(
                        "usage: KafkaPeer <" + String.join("|", SUBCOMMANDS.keySet()) + "> --bootstrap HOST:PORT ...");
            }
            Command command = SUBCOMMANDS.get(args[0]);
            command.run(Opts.parse(args, 1));
        } catch (Throwable t) {
            Throwable cause = t instanceof ExecutionException && t.getCause() != null ? t.getCause() : t;
            emit(obj("event", "error", "type", cause.getClass().getName(), "message", String.valueOf(cause.getMessage())));
            System.err.println("KafkaPeer: " + cause);
            status = 1;
        }
        System.out.flush();
        // The client's threads must not keep the JVM alive after the answer.
        System.exit(status);
    }

    // ---- produce ----------------------------------------------------------

    /** produce --topic T --count N [--acks all] [--idempotence true] [--compression none]
     *  [--key-prefix k] [--value-prefix v] [--partition P] [--linger-ms 5] */
    static void produce(Opts o) throws Exception {
        Properties p = o.clientProps();
        p.put(ProducerConfig.ACKS_CONFIG, o.get("acks", "all"));
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, o.get("idempotence", "true"));
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, o.get("compression", "none"));
        p.put(ProducerConfig.LINGER_MS_CONFIG, o.get("linger-ms", "5"));
        p.putAll(o.extraConfig());
        String topic = o.required("topic");
        int count = o.intOpt("count", 10);
        String keyPrefix = o.get("key-prefix", "key-");
        String valuePrefix = o.get("value-prefix", "value-");
        Integer partition = o.has("partition") ? o.intOpt("partition", 0) : null;
        List<Future<RecordMetadata>> sent = new ArrayList<>();
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
            for (int i = 0; i < count; i++) {
                ProducerRecord<String, String> r = new ProducerRecord<>(topic, partition, keyPrefix + i, valuePrefix + i);
                r.headers().add("n", Integer.toString(i).getBytes(StandardCharsets.UTF_8));
                sent.add(producer.send(r));
            }
            producer.flush();
            for (int i = 0; i < count; i++) {
                RecordMetadata m = sent.get(i).get();
                emit(obj("event", "sent", "key", keyPrefix + i, "value", valuePrefix + i,
                        "partition", m.partition(), "offset", m.offset(), "timestamp", m.timestamp()));
            }
        }
        emit(obj("event", "done", "sent", count));
    }

    // ---- consume ----------------------------------------------------------

    /** consume --topic T [--group G --protocol classic|consumer] [--count N] [--timeout-ms 30000]
     *  [--commit sync|none] [--isolation read_uncommitted|read_committed] [--offset-reset earliest]
     *  [--stop-on-stdin true] [--to-end true]
     *
     *  Without --group the consumer is assigned every partition of the topic. With
     *  --stop-on-stdin it runs until stdin closes (or a "stop" line), for tests that
     *  steer several members; with --to-end (no group) until it has read up to the
     *  partitions' end offsets taken at the start; otherwise until --count records
     *  or --timeout-ms. */
    static void consume(Opts o) throws Exception {
        Properties p = o.clientProps();
        String group = o.get("group", null);
        if (group != null) {
            p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
            p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, o.get("protocol", "classic"));
        }
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, o.get("offset-reset", "earliest"));
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, o.get("isolation", "read_uncommitted"));
        p.putAll(o.extraConfig());
        String topic = o.required("topic");
        int count = o.intOpt("count", Integer.MAX_VALUE);
        long deadline = System.currentTimeMillis() + o.intOpt("timeout-ms", 30000);
        boolean commit = o.get("commit", "none").equals("sync");
        boolean steered = o.bool("stop-on-stdin", false);
        boolean toEnd = o.bool("to-end", false);
        Map<TopicPartition, Long> ends = null;
        AtomicBoolean stop = new AtomicBoolean(false);
        int got = 0;
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(p, new StringDeserializer(), new StringDeserializer())) {
            if (steered) {
                Thread t = new Thread(() -> {
                    try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                        String line;
                        while ((line = in.readLine()) != null && !line.trim().equals("stop")) {
                            // keep reading until stop or EOF
                        }
                    } catch (Exception ignored) {
                        // EOF or a closed pipe: stop either way
                    }
                    stop.set(true);
                    consumer.wakeup();
                }, "stdin-stop");
                t.setDaemon(true);
                t.start();
            }
            if (group != null) {
                consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                    @Override
                    public void onPartitionsRevoked(Collection<TopicPartition> parts) {
                        emit(obj("event", "revoked", "partitions", partitionList(parts)));
                    }

                    @Override
                    public void onPartitionsAssigned(Collection<TopicPartition> parts) {
                        emit(obj("event", "assigned", "partitions", partitionList(parts)));
                    }
                });
            } else {
                List<TopicPartition> parts = new ArrayList<>();
                consumer.partitionsFor(topic).forEach(info -> parts.add(new TopicPartition(topic, info.partition())));
                consumer.assign(parts);
                emit(obj("event", "assigned", "partitions", partitionList(parts)));
                if (toEnd) {
                    // The end offsets as of now (under read_committed: the last stable offsets).
                    ends = consumer.endOffsets(parts, Duration.ofSeconds(30));
                }
            }
            while (!stop.get() && got < count && (steered || System.currentTimeMillis() < deadline)) {
                if (ends != null && atEnd(consumer, ends)) {
                    break;
                }
                ConsumerRecords<String, String> records;
                try {
                    records = consumer.poll(Duration.ofMillis(200));
                } catch (WakeupException e) {
                    break;
                }
                for (ConsumerRecord<String, String> r : records) {
                    Map<String, Object> headers = new LinkedHashMap<>();
                    for (Header h : r.headers()) {
                        headers.put(h.key(), h.value() == null ? null : new String(h.value(), StandardCharsets.UTF_8));
                    }
                    emit(obj("event", "record", "topic", r.topic(), "partition", r.partition(), "offset", r.offset(),
                            "key", r.key(), "value", r.value(), "timestamp", r.timestamp(), "headers", headers));
                    got++;
                }
                if (commit && !records.isEmpty()) {
                    Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                    for (TopicPartition tp : records.partitions()) {
                        List<ConsumerRecord<String, String>> rs = records.records(tp);
                        offsets.put(tp, new OffsetAndMetadata(rs.get(rs.size() - 1).offset() + 1));
                    }
                    commitAndEmit(consumer, offsets);
                }
            }
            if (group != null) {
                Map<String, Object> committed = new TreeMap<>();
                try {
                    consumer.committed(consumer.assignment(), Duration.ofSeconds(10)).forEach((tp, om) ->
                            committed.put(tp.toString(), om == null ? null : om.offset()));
                    emit(obj("event", "committed-now", "offsets", committed));
                } catch (KafkaException e) {
                    // Only a report (a stop's wakeup, a slow coordinator): the commits
                    // above are what counts, so say what happened and finish.
                    emit(obj("event", "committed-now", "error", e.getClass().getName(),
                            "message", String.valueOf(e.getMessage())));
                }
            }
        }
        emit(obj("event", "done", "count", got));
    }

    static boolean atEnd(KafkaConsumer<String, String> consumer, Map<TopicPartition, Long> ends) {
        for (Map.Entry<TopicPartition, Long> e : ends.entrySet()) {
            if (consumer.position(e.getKey(), Duration.ofSeconds(30)) < e.getValue()) {
                return false;
            }
        }
        return true;
    }

    static void commitAndEmit(KafkaConsumer<String, String> consumer, Map<TopicPartition, OffsetAndMetadata> offsets) {
        try {
            consumer.commitSync(offsets, Duration.ofSeconds(30));
        } catch (WakeupException e) {
            // A stop request woke the consumer in the middle of the commit: commit again.
            consumer.commitSync(offsets, Duration.ofSeconds(30));
        }
        Map<String, Object> shown = new TreeMap<>();
        offsets.forEach((tp, om) -> shown.put(tp.toString(), om.offset()));
        emit(obj("event", "committed", "offsets", shown));
    }

    // ---- transactions -----------------------------------------------------

    /** transactions --topic T --transactional-id ID [--transactions 4] [--records-per-txn 5]
     *  [--pattern ca] [--offsets-group G] : the i-th transaction commits if pattern[i % len] is
     *  'c', aborts on 'a'; with --offsets-group, each transaction also sends the offset i + 1 of
     *  partition 0 of T for group G (sendOffsetsToTransaction: the consume-transform-produce
     *  commit). */
    static void transactions(Opts o) throws Exception {
        Properties p = o.clientProps();
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, o.required("transactional-id"));
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.putAll(o.extraConfig());
        String topic = o.required("topic");
        int n = o.intOpt("transactions", 4);
        int per = o.intOpt("records-per-txn", 5);
        String pattern = o.get("pattern", "ca");
        String valuePrefix = o.get("value-prefix", "txn-");
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
            producer.initTransactions();
            for (int t = 0; t < n; t++) {
                boolean commit = pattern.charAt(t % pattern.length()) == 'c';
                producer.beginTransaction();
                List<Future<RecordMetadata>> sent = new ArrayList<>();
                List<String> values = new ArrayList<>();
                for (int i = 0; i < per; i++) {
                    String value = valuePrefix + t + "-" + i;
                    values.add(value);
                    sent.add(producer.send(new ProducerRecord<>(topic, "t" + t, value)));
                }
                producer.flush();
                List<Object> records = new ArrayList<>();
                for (int i = 0; i < per; i++) {
                    RecordMetadata m = sent.get(i).get();
                    records.add(obj("value", values.get(i), "partition", m.partition(), "offset", m.offset()));
                }
                if (o.has("offsets-group")) {
                    producer.sendOffsetsToTransaction(
                        Map.of(new TopicPartition(topic, 0), new OffsetAndMetadata(t + 1)),
                        new ConsumerGroupMetadata(o.required("offsets-group")));
                }
                if (commit) {
                    producer.commitTransaction();
                } else {
                    producer.abortTransaction();
                }
                emit(obj("event", "txn", "n", t, "outcome", commit ? "commit" : "abort", "records", records));
            }
        }
        emit(obj("event", "done", "transactions", n));
    }

    // ---- admin ------------------------------------------------------------

    /** admin <op> [op options]; ops are in ADMIN_OPS. */
    static void admin(Opts o) throws Exception {
        String op = o.positional(0);
        Command command = op == null ? null : ADMIN_OPS.get(op);
        if (command == null) {
            throw new IllegalArgumentException("usage: KafkaPeer admin <" + String.join("|", ADMIN_OPS.keySet()) + "> ...");
        }
        command.run(o);
    }

    static Admin adminClient(Opts o) {
        Properties p = o.clientProps();
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, o.get("api-timeout-ms", "30000"));
        p.putAll(o.extraConfig());
        return Admin.create(p);
    }

    static void describeCluster(Opts o) throws Exception {
        try (Admin admin = adminClient(o)) {
            DescribeClusterResult r = admin.describeCluster();
            List<Object> nodes = new ArrayList<>();
            for (Node n : r.nodes().get()) {
                nodes.add(node(n));
            }
            emit(obj("event", "cluster", "clusterId", r.clusterId().get(), "controller", node(r.controller().get()),
                    "nodes", nodes));
        }
    }

    /**
     * createTopics --topics a,b --partitions 3 --replication-factor 1 [--topic-config k=v,...]
     * [--validate-only true]: each topic's outcome and what CreateTopics v5+ answers about it
     * (partitions, replicationFactor, topicId (v7), configs with their sources).
     */
    static void createTopics(Opts o) throws Exception {
        int partitions = o.intOpt("partitions", 1);
        short rf = (short) o.intOpt("replication-factor", 1);
        Map<String, String> configs = new LinkedHashMap<>();
        for (String kv : o.list("topic-config")) {
            String[] parts = kv.split("=", 2);
            configs.put(parts[0], parts[1]);
        }
        List<NewTopic> topics = new ArrayList<>();
        for (String name : o.list("topics")) {
            topics.add(new NewTopic(name, partitions, rf).configs(configs));
        }
        try (Admin admin = adminClient(o)) {
            CreateTopicsOptions options = new CreateTopicsOptions().validateOnly(o.bool("validate-only", false));
            CreateTopicsResult r = admin.createTopics(topics, options);
            for (NewTopic t : topics) {
                Map<String, Object> out = obj("event", "topic", "name", t.name());
                try {
                    r.values().get(t.name()).get();
                    out.put("error", null);
                } catch (ExecutionException e) {
                    out.put("error", e.getCause().getClass().getSimpleName());
                    out.put("message", e.getCause().getMessage());
                }
                // Only CreateTopics v5+ answers with the topic's metadata (v7+: its id);
                // against an older broker these fail with UnsupportedVersionException, for a
                // topic that failed with its error: either is reported as metadataError.
                try {
                    out.put("partitions", r.numPartitions(t.name()).get());
                    out.put("replicationFactor", r.replicationFactor(t.name()).get());
                    out.put("topicId", r.topicId(t.name()).get().toString());
                    Map<String, Object> entries = new TreeMap<>();
                    for (ConfigEntry e : r.config(t.name()).get().entries()) {
                        entries.put(e.name(), obj("value", e.value(), "source", e.source().name(),
                                "readOnly", e.isReadOnly(), "sensitive", e.isSensitive()));
                    }
                    out.put("configs", entries);
                } catch (ExecutionException e) {
                    out.put("metadataError", e.getCause().getClass().getSimpleName());
                }
                emit(out);
            }
        }
    }

    static void listTopics(Opts o) throws Exception {
        try (Admin admin = adminClient(o)) {
            List<Object> names = new ArrayList<>();
            for (TopicListing t : admin.listTopics().listings().get()) {
                names.add(obj("name", t.name(), "topicId", t.topicId().toString(), "internal", t.isInternal()));
            }
            emit(obj("event", "topics", "topics", names));
        }
    }

    /** describeConfigs --type topic|broker --names a,b */
    static void describeConfigs(Opts o) throws Exception {
        ConfigResource.Type type = ConfigResource.Type.valueOf(o.get("type", "topic").toUpperCase());
        List<ConfigResource> resources = new ArrayList<>();
        for (String name : o.list("names")) {
            resources.add(new ConfigResource(type, name));
        }
        try (Admin admin = adminClient(o)) {
            Map<ConfigResource, Config> all = admin.describeConfigs(resources).all().get();
            for (ConfigResource res : resources) {
                Map<String, Object> entries = new TreeMap<>();
                for (ConfigEntry e : all.get(res).entries()) {
                    entries.put(e.name(), obj("value", e.value(), "source", e.source().name(),
                            "readOnly", e.isReadOnly(), "sensitive", e.isSensitive()));
                }
                emit(obj("event", "configs", "type", res.type().name(), "name", res.name(), "entries", entries));
            }
        }
    }

    /**
     * incrementalAlterConfigs --type topic|broker --name N --ops "k:SET:v;k2:DELETE:;k3:APPEND:a,b"
     * [--validate-only true]: one resource, the operations separated by ';'.
     */
    static void incrementalAlterConfigs(Opts o) throws Exception {
        ConfigResource.Type type = ConfigResource.Type.valueOf(o.get("type", "topic").toUpperCase());
        ConfigResource resource = new ConfigResource(type, o.get("name", ""));
        List<AlterConfigOp> ops = new ArrayList<>();
        for (String op : o.required("ops").split(";")) {
            String[] parts = op.split(":", 3);
            AlterConfigOp.OpType opType = AlterConfigOp.OpType.valueOf(parts[1]);
            String value = opType == AlterConfigOp.OpType.DELETE ? null : parts[2];
            ops.add(new AlterConfigOp(new ConfigEntry(parts[0], value), opType));
        }
        Map<ConfigResource, Collection<AlterConfigOp>> changes = new HashMap<>();
        changes.put(resource, ops);
        AlterConfigsOptions options = new AlterConfigsOptions().validateOnly(o.bool("validate-only", false));
        try (Admin admin = adminClient(o)) {
            Map<String, Object> out = obj("event", "altered", "type", type.name(), "name", resource.name());
            try {
                admin.incrementalAlterConfigs(changes, options).values().get(resource).get();
                out.put("error", null);
            } catch (ExecutionException e) {
                out.put("error", e.getCause().getClass().getSimpleName());
                out.put("message", e.getCause().getMessage());
            }
            emit(out);
        }
    }

    @SuppressWarnings({"deprecation", "removal"})
    static void listConsumerGroups(Opts o) throws Exception {
        try (Admin admin = adminClient(o)) {
            List<Object> groups = new ArrayList<>();
            for (ConsumerGroupListing g : admin.listConsumerGroups().all().get()) {
                groups.add(obj("groupId", g.groupId(), "simple", g.isSimpleConsumerGroup(),
                        "state", g.groupState().map(Enum::name).orElse(null),
                        "type", g.type().map(Enum::name).orElse(null)));
            }
            emit(obj("event", "groups", "groups", groups));
        }
    }

    /** describeProducers --topic T --partitions 0,1 */
    static void describeProducers(Opts o) throws Exception {
        String topic = o.required("topic");
        List<TopicPartition> parts = new ArrayList<>();
        for (String s : o.list("partitions")) {
            parts.add(new TopicPartition(topic, Integer.parseInt(s)));
        }
        try (Admin admin = adminClient(o)) {
            DescribeProducersResult r = admin.describeProducers(parts);
            for (Map.Entry<TopicPartition, DescribeProducersResult.PartitionProducerState> e : r.all().get().entrySet()) {
                List<Object> producers = new ArrayList<>();
                for (ProducerState s : e.getValue().activeProducers()) {
                    producers.add(obj("producerId", s.producerId(), "producerEpoch", s.producerEpoch(),
                            "lastSequence", s.lastSequence(), "lastTimestamp", s.lastTimestamp(),
                            "coordinatorEpoch", s.coordinatorEpoch().isPresent() ? s.coordinatorEpoch().getAsInt() : null,
                            "currentTransactionStartOffset",
                            s.currentTransactionStartOffset().isPresent() ? s.currentTransactionStartOffset().getAsLong() : null));
                }
                emit(obj("event", "producers", "topic", e.getKey().topic(), "partition", e.getKey().partition(),
                        "producers", producers));
            }
        }
    }

    /** describeMetadataQuorum: the KRaft quorum (DescribeQuorum, answered through a broker). */
    static void describeMetadataQuorum(Opts o) throws Exception {
        try (Admin admin = adminClient(o)) {
            QuorumInfo q = admin.describeMetadataQuorum().quorumInfo().get();
            emit(obj("event", "quorum", "leaderId", q.leaderId(), "leaderEpoch", q.leaderEpoch(),
                    "highWatermark", q.highWatermark(), "voters", replicaStates(q.voters()),
                    "observers", replicaStates(q.observers())));
        }
    }

    static List<Object> replicaStates(List<QuorumInfo.ReplicaState> replicas) {
        List<Object> out = new ArrayList<>();
        for (QuorumInfo.ReplicaState r : replicas) {
            out.add(obj("replicaId", r.replicaId(), "logEndOffset", r.logEndOffset(),
                    "lastFetchTimestamp", r.lastFetchTimestamp().orElse(-1L),
                    "lastCaughtUpTimestamp", r.lastCaughtUpTimestamp().orElse(-1L)));
        }
        return out;
    }

    /** "t:0" as a TopicPartition. */
    static TopicPartition topicPartition(String s) {
        int colon = s.lastIndexOf(':');
        return new TopicPartition(s.substring(0, colon), Integer.parseInt(s.substring(colon + 1)));
    }

    static String errorName(ExecutionException e) {
        return e.getCause().getClass().getSimpleName();
    }

    /** electLeaders --election-type preferred|unclean [--partitions t:0,t:1] (none: every
     *  partition); one "election" event a partition: error null or the exception's class. */
    static void electLeaders(Opts o) throws Exception {
        ElectionType type = ElectionType.valueOf(o.get("election-type", "preferred").toUpperCase());
        Set<TopicPartition> parts = null;
        if (o.has("partitions")) {
            parts = new java.util.LinkedHashSet<>();
            for (String s : o.list("partitions")) {
                parts.add(topicPartition(s));
            }
        }
        try (Admin admin = adminClient(o)) {
            Map<TopicPartition, Optional<Throwable>> results = admin.electLeaders(type, parts).partitions().get();
            for (Map.Entry<TopicPartition, Optional<Throwable>> e : results.entrySet()) {
                emit(obj("event", "election", "topic", e.getKey().topic(), "partition", e.getKey().partition(),
                        "error", e.getValue().map(t -> t.getClass().getSimpleName()).orElse(null)));
            }
            emit(obj("event", "done", "results", results.size()));
        }
    }

    /** alterPartitionReassignments --reassignments t:0=2/3,t:1=cancel
     *  [--allow-replication-factor-change false]; one "reassignment" event a partition. */
    static void alterPartitionReassignments(Opts o) throws Exception {
        Map<TopicPartition, Optional<NewPartitionReassignment>> targets = new LinkedHashMap<>();
        for (String entry : o.list("reassignments")) {
            String[] parts = entry.split("=", 2);
            if (parts[1].equals("cancel")) {
                targets.put(topicPartition(parts[0]), Optional.empty());
            } else {
                List<Integer> replicas = new ArrayList<>();
                for (String r : parts[1].split("/")) {
                    replicas.add(Integer.parseInt(r));
                }
                targets.put(topicPartition(parts[0]), Optional.of(new NewPartitionReassignment(replicas)));
            }
        }
        AlterPartitionReassignmentsOptions options = new AlterPartitionReassignmentsOptions()
                .allowReplicationFactorChange(o.bool("allow-replication-factor-change", true));
        try (Admin admin = adminClient(o)) {
            Map<TopicPartition, org.apache.kafka.common.KafkaFuture<Void>> values =
                    admin.alterPartitionReassignments(targets, options).values();
            for (TopicPartition tp : targets.keySet()) {
                Map<String, Object> out = obj("event", "reassignment", "topic", tp.topic(), "partition", tp.partition());
                try {
                    values.get(tp).get();
                    out.put("error", null);
                } catch (ExecutionException e) {
                    out.put("error", errorName(e));
                    out.put("message", e.getCause().getMessage());
                }
                emit(out);
            }
        }
    }

    /** listPartitionReassignments [--partitions t:0,t:1] (none: all); one "ongoing" event
     *  a partition being reassigned, then "done". */
    static void listPartitionReassignments(Opts o) throws Exception {
        try (Admin admin = adminClient(o)) {
            Map<TopicPartition, PartitionReassignment> ongoing;
            if (o.has("partitions")) {
                Set<TopicPartition> parts = new java.util.LinkedHashSet<>();
                for (String s : o.list("partitions")) {
                    parts.add(topicPartition(s));
                }
                ongoing = admin.listPartitionReassignments(parts).reassignments().get();
            } else {
                ongoing = admin.listPartitionReassignments().reassignments().get();
            }
            for (Map.Entry<TopicPartition, PartitionReassignment> e : ongoing.entrySet()) {
                emit(obj("event", "ongoing", "topic", e.getKey().topic(), "partition", e.getKey().partition(),
                        "replicas", new ArrayList<Object>(e.getValue().replicas()),
                        "adding", new ArrayList<Object>(e.getValue().addingReplicas()),
                        "removing", new ArrayList<Object>(e.getValue().removingReplicas())));
            }
            emit(obj("event", "done", "ongoing", ongoing.size()));
        }
    }

    static Map<String, Object> node(Node n) {
        return n == null ? null : obj("id", n.id(), "host", n.host(), "port", n.port(), "rack", n.rack());
    }

    static List<Object> partitionList(Collection<TopicPartition> parts) {
        List<Object> out = new ArrayList<>();
        for (TopicPartition tp : parts) {
            out.add(obj("topic", tp.topic(), "partition", tp.partition()));
        }
        return out;
    }

    // ---- options ----------------------------------------------------------

    static final class Opts {
        final Map<String, List<String>> values = new HashMap<>();
        final List<String> positionals = new ArrayList<>();

        static Opts parse(String[] args, int from) {
            Opts o = new Opts();
            for (int i = from; i < args.length; i++) {
                if (args[i].startsWith("--")) {
                    if (i + 1 >= args.length) {
                        throw new IllegalArgumentException("option " + args[i] + " needs a value");
                    }
                    o.values.computeIfAbsent(args[i].substring(2), k -> new ArrayList<>()).add(args[++i]);
                } else {
                    o.positionals.add(args[i]);
                }
            }
            return o;
        }

        boolean has(String name) {
            return values.containsKey(name);
        }

        String get(String name, String fallback) {
            List<String> v = values.get(name);
            return v == null ? fallback : v.get(v.size() - 1);
        }

        String required(String name) {
            String v = get(name, null);
            if (v == null) {
                throw new IllegalArgumentException("--" + name + " is required");
            }
            return v;
        }

        int intOpt(String name, int fallback) {
            String v = get(name, null);
            return v == null ? fallback : Integer.parseInt(v);
        }

        boolean bool(String name, boolean fallback) {
            String v = get(name, null);
            return v == null ? fallback : Boolean.parseBoolean(v);
        }

        /** A comma-separated option as a list (empty when absent). */
        List<String> list(String name) {
            List<String> out = new ArrayList<>();
            String v = get(name, null);
            if (v != null && !v.isEmpty()) {
                for (String s : v.split(",")) {
                    out.add(s.trim());
                }
            }
            return out;
        }

        String positional(int i) {
            return i < positionals.size() ? positionals.get(i) : null;
        }

        /** bootstrap.servers and client.id, the properties every client takes. */
        Properties clientProps() {
            Properties p = new Properties();
            p.put("bootstrap.servers", required("bootstrap"));
            p.put("client.id", get("client-id", "kafkalab-java-peer"));
            return p;
        }

        /** Every --config key=value, applied last so a test can override anything. */
        Properties extraConfig() {
            Properties p = new Properties();
            for (String kv : values.getOrDefault("config", List.of())) {
                String[] parts = kv.split("=", 2);
                if (parts.length != 2) {
                    throw new IllegalArgumentException("--config wants key=value, got " + kv);
                }
                p.put(parts[0], parts[1]);
            }
            return p;
        }
    }

    // ---- JSON lines -------------------------------------------------------

    static Map<String, Object> obj(Object... kv) {
        Map<String, Object> m = new LinkedHashMap<>();
        for (int i = 0; i < kv.length; i += 2) {
            m.put((String) kv[i], kv[i + 1]);
        }
        return m;
    }

    static synchronized void emit(Map<String, Object> event) {
        StringBuilder b = new StringBuilder();
        json(b, event);
        System.out.println(b);
        System.out.flush();
    }

    static void json(StringBuilder b, Object v) {
        if (v == null) {
            b.append("null");
        } else if (v instanceof Map<?, ?> m) {
            b.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : m.entrySet()) {
                if (!first) {
                    b.append(", ");
                }
                first = false;
                string(b, String.valueOf(e.getKey()));
                b.append(": ");
                json(b, e.getValue());
            }
            b.append('}');
        } else if (v instanceof Collection<?> c) {
            b.append('[');
            boolean first = true;
            for (Object x : c) {
                if (!first) {
                    b.append(", ");
                }
                first = false;
                json(b, x);
            }
            b.append(']');
        } else if (v instanceof Boolean || v instanceof Integer || v instanceof Long || v instanceof Short) {
            b.append(v);
        } else {
            string(b, v.toString());
        }
    }

    static void string(StringBuilder b, String s) {
        b.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                case '\n' -> b.append("\\n");
                case '\r' -> b.append("\\r");
                case '\t' -> b.append("\\t");
                default -> {
                    if (c < 0x20) {
                        b.append(String.format("\\u%04x", (int) c));
                    } else {
                        b.append(c);
                    }
                }
            }
        }
        b.append('"');
    }

    private KafkaPeer() {
    }
}
