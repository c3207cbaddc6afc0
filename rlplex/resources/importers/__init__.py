"""Importers of other frameworks' placement configs (ROLL, RLinf, verl) into the native form."""
