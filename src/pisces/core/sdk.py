"""The documented import path of ``create_agent_session``, kept for published code: the build step lives in
``pisces.core.session.build``."""

from pisces.core.errors import SessionConfigError as SessionConfigError
from pisces.core.errors import UsageError as UsageError
from pisces.core.session.build import (
    create_agent_session as create_agent_session,
)
from pisces.core.session.build import (
    create_session_from_args as create_session_from_args,
)
