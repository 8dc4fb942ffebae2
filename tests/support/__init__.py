"""Helpers shared by the tests, each defined once: plain functions and classes, no fixtures.

Fixtures live in ``conftest.py`` files (the root one, or a layer's) and tests get
them by parameter; helpers are imported from here:

- ``accounts``: ``UserFactory``, ``make_user`` (an active reader), ``signed_in``;
- ``graph``: ``follow``/``unfollow`` through the service, the mirror-equals-database checks, edge-list files;
- ``feed``: ``Publisher`` (publish a note with its fan-out run), inbox reads, paging to the end;
- ``consistency``: the Redis feed against the database's (invariant 6);
- ``cursors``: ``forged``, a cursor token a client made up;
- ``commits``: ``run_on_commit``, a block whose after-commit work runs as a request's would;
- ``celery``: ``celery_conf``, ``refusing_broker``;
- ``redis``: ``unlink_prefix``;
- ``commands``: the argv of a private ``redis-server`` and of a Celery worker (tests, the test cluster and the benchmarks start them);
- ``faults``: real processes to kill and restart (a private redis-server, a Celery worker), waits;
- ``browser``: reading pages in the browser journeys, and their viewports.
"""
