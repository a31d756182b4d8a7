"""The documented import path of ``create_agent_session``, kept for published code: the build step lives in
``pisces.core.session.build``."""

from pisces.core.session.build import (
    create_agent_session as create_agent_session,
    create_session_from_args as create_session_from_args,
)
from pisces.core.errors import SessionConfigError as SessionConfigError, UsageError as UsageError
