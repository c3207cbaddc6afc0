"""Importers of other frameworks' configs (ROLL, RLinf, verl, NeMo RL) into the native form."""
