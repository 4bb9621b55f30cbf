"""The ``tests`` client workflow: an OpenAI API conformance suite run with pytest against a live server.

``run_tests.py`` is the entry (client workflow contract); ``cases/`` holds the pytest suite;
``record.py`` the typed result record written beside the JUnit XML.
"""
