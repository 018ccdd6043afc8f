"""Sending whole runs to Celery workers: :class:`CeleryRunQueue`."""

from __future__ import annotations

from converge.run_queue import Action
from converge.workers.app import celery_app
from converge.workers.runs import RUN_TASK
from engine import ConvergeError

__all__ = ["CeleryRunQueue"]


class CeleryRunQueue:
    """Sends run messages to ``queue`` on ``broker_url`` (no result backend needed).

    ``converge worker --broker URL --queue NAME --db URL`` consumes them. Raises
    ``ConvergeError`` from :meth:`send` when the broker cannot be reached (the run
    stays recorded as queued; ``converge worker --recover`` sends it again).
    """

    def __init__(self, broker_url: str, queue: str) -> None:
        self.queue = queue
        self._app = celery_app(broker_url, None)

    def send(self, run_id: str, action: Action = "run") -> None:
        """Put ``(run_id, action)`` on the queue."""
        try:
            self._app.send_task(RUN_TASK, args=[run_id, action], queue=self.queue)
        except Exception as exc:  # kombu raises OperationalError and socket errors
            raise ConvergeError(f"cannot send run {run_id} to queue {self.queue!r}: {exc}") from exc

    def connect(self) -> None:
        """Make the broker connection the next :meth:`send` uses now (a server's
        first answer then does not make it). Raises ``ConvergeError`` when the
        broker cannot be reached."""
        try:
            with self._app.producer_or_acquire() as producer:
                producer.connection.ensure_connection(max_retries=1)
        except Exception as exc:  # kombu raises OperationalError and socket errors
            raise ConvergeError(f"cannot reach the broker of queue {self.queue!r}: {exc}") from exc

    def close(self) -> None:
        """Release the broker connections."""
        self._app.close()
