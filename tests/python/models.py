"""Pydantic models the tests ask for. Strings and lists are bounded so that a small model
cannot ramble past the token budget inside a string."""
from typing import Annotated, List, Literal

from pydantic import BaseModel, Field

Short = Annotated[str, Field(min_length=1, max_length=24)]
Age = Annotated[int, Field(ge=0, le=120)]


class Person(BaseModel):
    name: Short
    age: Age


class Event(BaseModel):
    name: Short
    day: Literal["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
    participants: Annotated[List[Person], Field(max_length=2)]


class CalendarEvents(BaseModel):
    events: Annotated[List[Event], Field(min_length=1, max_length=2)]


class Country(BaseModel):
    name: Short
    capital: Short
    languages: Annotated[List[Short], Field(max_length=3)]


class WeatherArgs(BaseModel):
    city: Short
    unit: Literal["celsius", "fahrenheit"]
