#!/usr/bin/env python
import gc
import os
import sys

from django.core.management import BaseCommand, ManagementUtility


class StartupUtility(ManagementUtility):
    """Django's command-line utility with the cyclic garbage collector kept off while the process starts.

    Start-up creates the objects that live as long as the process (modules, model classes, admin and form
    classes): a collection walks them again and again and frees none, which cost about a tenth of a short command's
    CPU time. Once the command is loaded they are frozen out of the collector's reach and collection resumes, so a
    long-running command (a server, an import) collects as usual.
    """

    def fetch_command(self, subcommand: str) -> BaseCommand:
        command = super().fetch_command(subcommand)
        gc.freeze()
        gc.enable()
        return command


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
    gc.disable()
    StartupUtility(sys.argv).execute()


if __name__ == "__main__":
    main()
