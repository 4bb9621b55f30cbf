"""One served model's request pool: admission (queue, deadlines, answers), dispatch (work to
workers, answers back) and supervision (worker start, death, restart), composed by ModelPool.
The typed messages of the worker pipe are in ``media_server/worker_messages.py``, below both this
package and the worker process (``workers.py``), which both speak them."""
