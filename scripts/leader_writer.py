"""An OLTP-like writer on a leader, for the deployed tests and the lag benchmark: small
transactions from a thread until stopped.

Each transaction inserts an order, updates another, deletes one every fifth time and upserts an
account's balance; with ``keyless`` it also inserts a row into that table without a key (its
rows repeat: a multiset). The tables, in ``database``::

    orders (id INT AUTO_INCREMENT PRIMARY KEY, customer INT NOT NULL, amount DECIMAL(..))
    accounts (id INT PRIMARY KEY, balance BIGINT NOT NULL)
    <keyless> (kind INT, note VARCHAR(..))
"""

from __future__ import annotations

import random
import threading

from local_services import MariaDBServer


class LeaderWriter:
    """``keys``: orders updated and deleted are among ids 1..keys; ``accounts``: how many
    accounts are upserted; ``pause``: seconds between transactions (0: back to back, as fast as
    the leader takes them)."""

    def __init__(self, server: MariaDBServer, database: str, *, keys: int, accounts: int, pause: float = 0.0,
                 keyless: str | None = None, seed: int = 7):
        self.server, self.database, self.commits = server, database, 0
        self.keys, self.accounts, self.pause, self.keyless, self.seed = keys, accounts, pause, keyless, seed
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None

    def start(self) -> "LeaderWriter":
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="leader-writer", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        rnd = random.Random(self.seed)
        conn = self.server.connect(database=self.database)
        try:
            with conn.cursor() as cur:
                while not self._stop.is_set():
                    key = rnd.randint(1, self.keys)
                    conn.begin()  # one transaction (the servers' connect() is autocommit)
                    cur.execute("INSERT INTO orders (customer, amount) VALUES (%s, %s)", (key % 97, key / 7))
                    cur.execute("UPDATE orders SET amount = amount + 1 WHERE id = %s", (key,))
                    if key % 5 == 0:
                        cur.execute("DELETE FROM orders WHERE id = %s", (key - 1,))
                    if self.keyless:
                        cur.execute(f"INSERT INTO {self.keyless} VALUES (%s, 'tick')", (key % 3,))
                    cur.execute("INSERT INTO accounts VALUES (%s, 1) ON DUPLICATE KEY UPDATE balance = balance + 1",
                                (key % self.accounts,))
                    conn.commit()
                    self.commits += 1
                    if self.pause:
                        self._stop.wait(self.pause)
        except BaseException as exc:  # surfaced by stop()
            self.error = exc
        finally:
            conn.close()

    def stop(self) -> None:
        """Stops the writer; raises what stopped it early, if anything did."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=60)
        if self.error is not None:
            raise self.error
