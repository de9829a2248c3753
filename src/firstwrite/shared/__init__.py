"""What the programs on top of the layer share, so that none imports another to reach it.

The CLI, the console and the demo import from here; nothing here imports them (nor the engine,
the layer or the HTTP middleware). :mod:`.first_writer_wins`: the judgment of a race, made by
``firstwrite race`` and the console's race. :mod:`.command_line`: exit statuses and one-line
errors, for ``firstwrite`` and ``python -m firstwrite.demo``. :mod:`.demo_command`: the demo's
options, which both of those parse. :mod:`.http_reply`: the stored form of an HTTP response,
which the middleware writes and :mod:`.result_display` decodes to show a stored result the same
way in ``firstwrite keys`` and the console (through the layer's ``record_view``).
"""
