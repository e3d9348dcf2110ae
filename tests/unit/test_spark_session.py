"""The local SparkSession's settings, without starting Spark: the driver's memory
comes from KAFKALAB_SPARK_DRIVER_MEMORY (Binder sets 1g), 2g when it is unset."""

from __future__ import annotations

from kafkalab.spark.session import DRIVER_MEMORY_ENV, spark_settings


def test_driver_memory_defaults_to_2g(monkeypatch) -> None:
    monkeypatch.delenv(DRIVER_MEMORY_ENV, raising=False)
    assert spark_settings()["spark.driver.memory"] == "2g"


def test_driver_memory_comes_from_the_environment(monkeypatch) -> None:
    monkeypatch.setenv(DRIVER_MEMORY_ENV, "1g")
    assert spark_settings()["spark.driver.memory"] == "1g"


def test_an_empty_variable_keeps_the_default(monkeypatch) -> None:
    monkeypatch.setenv(DRIVER_MEMORY_ENV, "")
    assert spark_settings()["spark.driver.memory"] == "2g"


def test_explicit_conf_overrides_the_settings(monkeypatch) -> None:
    monkeypatch.setenv(DRIVER_MEMORY_ENV, "1g")
    settings = spark_settings(cores=4, **{"spark.driver.memory": "3g"})
    assert settings["spark.driver.memory"] == "3g"
    assert settings["spark.sql.shuffle.partitions"] == "4"
