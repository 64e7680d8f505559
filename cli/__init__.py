"""The ``squall`` command line: the top floor, above ``deploy/``.

:mod:`.main` is the click group (it only parses options), :mod:`.commands` the client
commands as plain functions, :mod:`.daemons` the foreground Nimbus and supervisor.
"""
