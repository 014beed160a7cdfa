"""Pure judge-versus-human statistics (no ORM): fed by selectors, shared by CLI, API and dashboard."""
