"""The web UI's process side: what each app process publishes (its reports and errors)
and answers (commands, probes)."""
