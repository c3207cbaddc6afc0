"""Importers of other frameworks' configs (ROLL, RLinf, verl, NeMo RL; OpenRLHF's launch
scripts) into the native form."""
