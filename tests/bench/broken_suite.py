"""A suite that fails, for the runner's test: `all` must record it and carry on."""


def run(quick, kills, progress_factory, **options):
    progress_factory("about to fail", 1)
    raise RuntimeError("this suite always fails")


def table(report):
    raise AssertionError("never reached")
