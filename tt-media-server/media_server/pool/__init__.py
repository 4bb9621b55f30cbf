"""One served model's request pool: admission (queue, deadlines, answers), dispatch (work to
workers, answers back) and supervision (worker start, death, restart), composed by ModelPool;
the typed messages of the worker pipe are in messages.py."""
