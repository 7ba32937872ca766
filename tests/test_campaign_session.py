"""The campaign's Spark settings, without starting Spark."""

from cowcheck.spark_fuzz.session import LOG4J2_PROPERTIES, campaign_conf


def test_a_local_campaign_has_no_ui_no_progress_bars_and_logs_warnings_only():
    conf = campaign_conf("local[2]")
    assert (conf["spark.ui.enabled"], conf["spark.ui.showConsoleProgress"]) == ("false", "false")
    assert f"-Dlog4j2.configurationFile={LOG4J2_PROPERTIES.as_uri()}" in conf["spark.driver.extraJavaOptions"]
    assert "rootLogger.level = warn" in LOG4J2_PROPERTIES.read_text()


def test_jvm_start_up_flags_are_for_local_masters_only():
    assert "-XX:TieredStopAtLevel=1" in campaign_conf("local[*]")["spark.driver.extraJavaOptions"]
    assert "-XX:TieredStopAtLevel=1" not in campaign_conf("spark://head:7077")["spark.driver.extraJavaOptions"]
    assert campaign_conf("spark://head:7077")["spark.master"] == "spark://head:7077"
