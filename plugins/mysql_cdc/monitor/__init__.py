"""Operating a pipeline: how far behind it is (``lag``), whether the follower equals the leader
(``verify``), and the heartbeat that keeps an idle leader's figures fresh (``heartbeat``).

Plain Python on settings and DB-API connections, like ``capture``: the Airflow hooks, the check
and verify tasks and the CDC page (``ui``) call it.
"""
