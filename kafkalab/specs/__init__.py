"""TLA+ specifications of kafkalab and the tools that check them."""
