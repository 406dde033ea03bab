"""Plain modules the tests share: where the data is (files), exports built or unpacked for the
tests (exports), reading terminal tables (terminal), dashboards in a browser (browser). No test
lives here, and no test module imports another test module (tests/test_layout.py checks it).
fake_nsys.py and sleep_train.py are programs the tests run, not modules they import."""
