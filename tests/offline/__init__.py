"""Offline Pacemaker tool tests: crm_simulate, cibadmin and pcs on CIB files, no cluster."""
