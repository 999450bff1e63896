"""The Airflow plugin of mysql-cdc: the "CDC pipelines" page and ``GET /cdc/api/pipelines``.

The only module of the plugins folder Airflow's plugin loader walks (``.airflowignore`` keeps it out
of ``mysql_cdc/``); it mounts ``mysql_cdc.ui.app`` at ``/cdc`` and links it from the navigation.
"""

from airflow.plugins_manager import AirflowPlugin

from mysql_cdc.ui.app import app


class MySQLCdcPlugin(AirflowPlugin):
    name = "mysql_cdc"
    fastapi_apps = [{"app": app, "url_prefix": "/cdc", "name": "CDC pipelines"}]
    external_views = [{"name": "CDC pipelines", "href": "cdc/", "destination": "nav", "url_route": "cdc"}]
