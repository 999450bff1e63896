"""The "CDC pipelines" page and its JSON API, a FastAPI app the Airflow plugin mounts at ``/cdc``
(``plugins/mysql_cdc_ui.py``). ``data`` reads the figures through the pipeline hooks, ``page``
renders them as HTML (pure functions of the figures), ``app`` wires routes and Airflow's auth."""
