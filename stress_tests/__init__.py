"""The ``stress_tests`` client workflow: load points, endurance, over-saturation and SLO capacity search
against a live server, driven by the benchmark client (``benchmarking.client``)."""
